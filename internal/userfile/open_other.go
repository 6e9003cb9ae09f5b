//go:build !unix

package userfile

// nonBlock is 0 where opening has no non-blocking flag.
const nonBlock = 0
