// Package calib calibrates a float model on text before quantization: it
// runs the graph interpreter over calibration samples, collects each
// linear input's statistics (mean and max |x| per channel, range, a row
// sample, and optionally the second moment X^T X), and applies the
// recipe's calibrated methods to the float weights:
//
//   - SmoothQuant-style migration and AWQ scales (quant.SmoothScales,
//     quant.AWQScales) for the linears whose input comes from an RMSNorm
//     (the scale is folded into its gain) or from the product of an MLP's
//     gate and up projections (folded into the up projection's rows); the
//     model stays exactly equivalent in float;
//   - GPTQ's second moments, handed to the quantizer per weight.
//
// Inputs are those of the float model (each layer sees unquantized
// predecessors), one pass for all layers.
package calib
