"""torchaudio's side of `npm run bench -- speech-features`: the speech front end on one thread.

    python3 bench/speech_features.py OPTIONS_JSON FILE_LIST WARMUP

For every WAV file listed in FILE_LIST (one path a line): torchaudio.load, resample to the options'
sampleRate with torchaudio.functional.resample (its defaults), and Kaldi's MFCC (or log-mel filterbank)
with torchaudio.compliance.kaldi, every option mapped from paratrain's FeatureOptions as
test/speech/fixtures/make-features-fixture.py maps them. The first WARMUP files are run once untimed.
Prints one JSON line: utterances, seconds (wall), cpuSeconds, frames, and the versions.
"""
import json
import sys
import time

import torch
import torchaudio
import torchaudio.compliance.kaldi as kaldi

torch.set_num_threads(1)
options = json.loads(sys.argv[1])
with open(sys.argv[2]) as f:
    files = [line.strip() for line in f if line.strip()]
warmup = int(sys.argv[3])

WINDOWS = {"hann": "hanning", "hamming": "hamming", "povey": "povey", "rectangular": "rectangular"}
common = dict(
    sample_frequency=options["sampleRate"],
    frame_length=options["windowMs"],
    frame_shift=options["stepMs"],
    num_mel_bins=options["melFilters"],
    window_type=WINDOWS[options["window"]],
    preemphasis_coefficient=float(options["preemphasis"]),
    remove_dc_offset=options["removeDcOffset"],
    low_freq=float(options["lowHz"]),
    high_freq=float(options["highHz"]),
    dither=0.0,
    snip_edges=True,
    round_to_power_of_two=True,
    use_energy=False,
)
rate = options["sampleRate"]
if options["type"] == "mfcc":
    def features(wave):
        return kaldi.mfcc(wave, num_ceps=options["coefficients"], cepstral_lifter=float(options["lifter"]), **common)
else:
    def features(wave):
        return kaldi.fbank(wave, **common)


def front_end(path):
    wave, source_rate = torchaudio.load(path)
    wave = wave.mean(dim=0, keepdim=True)
    if source_rate != rate:
        wave = torchaudio.functional.resample(wave, source_rate, rate)
    # Kaldi reads 16-bit samples as integers; paratrain scales its [-1, 1) samples the same way
    return features(wave * 32768.0)


with torch.inference_mode():
    for path in files[:warmup]:
        front_end(path)
    frames = 0
    start, cpu = time.perf_counter(), time.process_time()
    for path in files:
        frames += front_end(path).shape[0]
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
print(json.dumps(dict(utterances=len(files), seconds=seconds, cpuSeconds=cpu_seconds, frames=frames,
                      torch=torch.__version__, torchaudio=torchaudio.__version__)))
