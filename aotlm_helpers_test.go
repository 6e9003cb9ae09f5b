package aotlm_test

import "github.com/aotlm/aotlm"

var tokOpts = aotlm.EncodeOptions{ParseSpecial: true}
