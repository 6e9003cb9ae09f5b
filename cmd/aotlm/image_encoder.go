package main

const visionBucketsHelp = "image sizes HxW in pixels, comma-separated, a Qwen2-VL or Qwen2.5-VL encoder is compiled for, one vision plan each " +
	"(default: square, 3:4, 4:3, 9:16 and 16:9 sizes of 64 to 576 image tokens)"
