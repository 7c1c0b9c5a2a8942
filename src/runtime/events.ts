/** Everything a run reports, as it happens; the CLI renders them, the metrics file stores them. */
export type TrainEvent =
  | { type: 'start'; runDir: string; dataSource: string; backend: string; devices: number; strategy: string;
      parameters: number; trainSamples: number; testSamples: number; epochs: number; stepsPerEpoch: number; globalBatch: number }
  | { type: 'step'; rank: number; epoch: number; step: number; stepInEpoch: number; stepsPerEpoch: number;
      loss: number; accuracy: number; lr: number; samples: number; computeMs: number; commMs: number }
  | { type: 'epoch'; epoch: number; loss: number; accuracy: number; samples: number; seconds: number; samplesPerSecond: number }
  | { type: 'eval'; epoch: number; step: number; testLoss: number; testAccuracy: number }
  | { type: 'checkpoint'; epoch: number; path: string }
  | { type: 'end'; seconds: number; samplesPerSecond: number; testAccuracy: number; testLoss: number };

export type EventSink = (event: TrainEvent) => void;
