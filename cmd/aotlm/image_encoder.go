package main

const visionBucketsHelp = "image sizes HxW in pixels, comma-separated, a Qwen2-VL or Qwen2.5-VL encoder is compiled for, one vision plan each " +
	"(default: square, 3:4, 4:3, 9:16 and 16:9 sizes of 64 to 576 image tokens)"

const visionLlamaCppHelp = "follow llama.cpp's mtmd where an InternVL encoder's Hugging Face processing differs " +
	"(the class token's position row after the patches', LLaVA-NeXT's tile grid with the overview always added); " +
	"default: Hugging Face's, which the models were trained with"
