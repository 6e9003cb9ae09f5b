package limits

import "fmt"

// Size is a positive byte count given on the command line as ParseSize
// reads it (256M, 1G); it is a flag value (pflag.Value).
type Size int64

// String prints the size with the largest suffix that divides it.
func (s *Size) String() string {
	n := int64(*s)
	for _, u := range []struct {
		suffix string
		shift  uint
	}{{"G", 30}, {"M", 20}, {"K", 10}} {
		if n != 0 && n%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d%s", n>>u.shift, u.suffix)
		}
	}
	return fmt.Sprint(n)
}

// Set parses v; zero is refused.
func (s *Size) Set(v string) error {
	n, err := ParseSize(v)
	if err != nil || n == 0 {
		return fmt.Errorf("%q: want a size in bytes such as 256M", v)
	}
	*s = Size(n)
	return nil
}

// Type names the value in help text.
func (s *Size) Type() string { return "size" }
