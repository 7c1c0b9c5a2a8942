/*
 * What attention.c and attention_rows.c share: the softmax rows of attention's scores and their
 * backward, in C (AVX-512 or AVX2 vectors in float32, else scalar in float64 like the js kernels).
 */
#ifndef PARATRAIN_ONEDNN_ATTENTION_H
#define PARATRAIN_ONEDNN_ATTENTION_H

#include <math.h>
#include "onednn.h"

/** How the rows run: scalar float64, 8 float32 lanes (AVX2 and FMA), 16 (AVX-512). */
typedef enum { ROWS_SCALAR = 0, ROWS_AVX2, ROWS_AVX512 } RowsPath;

/**
 * The rows' path here: AVX-512 where the CPU has it and oneDNN may use it (direct.h's guard), else
 * AVX2 where the CPU has it and FMA, else scalar; scalar under setDirect(false).
 */
RowsPath rowsPath(const Instance *inst);

/**
 * One head's T×T scores S (already scaled) → P in place: query row i < len is the softmax of its
 * first keys (i + 1 when causal, at most len; len otherwise), row maximum subtracted, the other keys
 * 0; rows i ≥ len are all 0.
 */
void softmaxRows(float *s, int64_t T, int64_t len, bool causal, RowsPath path);

/** `rows` rows T wide: dS = P ⊙ (dP − rowsum(dP ⊙ P)), written over dP. */
void scoreGradRows(const float *p, float *dp, int64_t rows, int64_t T, RowsPath path);

#endif
