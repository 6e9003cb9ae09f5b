// Package recipe executes quantization recipes on a float model: it reads
// a recipe (a preset or a JSON file), prepares the model as the recipe
// asks before its weights are quantized (Hadamard rotations, calibration
// over a text and the calibrated methods: SmoothQuant and AWQ scales,
// GPTQ, grid search, outlier channels), measures each linear's
// sensitivity to quantization, and picks an automatic recipe within a
// size budget. Flags and printing stay with the command line.
package recipe
