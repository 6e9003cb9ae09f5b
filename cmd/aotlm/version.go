package main

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/aotlm/aotlm/internal/bench"
)

// version is set at link time (-ldflags "-X main.version=v0.1.0").
var version = "dev"

func newVersionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the aotlm version, its Go version and the kernels chosen for this CPU",
		Long: `Print the aotlm version and build information: the Go version it was built
with, the OS and architecture, the commit when known, and the SIMD kernels
chosen for this CPU (for example "amd64: avx2+avx512vnni" or
"arm64: neon+dotprod"; "generic" is the plain-Go code, as in a purego build).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info := map[string]string{"version": version, "go": runtime.Version(),
				"os": runtime.GOOS, "arch": runtime.GOARCH, "kernels": bench.Kernels()}
			if bi, ok := debug.ReadBuildInfo(); ok {
				for _, s := range bi.Settings {
					if s.Key == "vcs.revision" {
						info["commit"] = s.Value
					}
				}
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(info)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "aotlm %s\n", version)
			if c := info["commit"]; c != "" {
				fmt.Fprintf(w, "commit:  %s\n", c)
			}
			fmt.Fprintf(w, "go:      %s %s/%s\n", info["go"], info["os"], info["arch"])
			_, err := fmt.Fprintf(w, "kernels: %s: %s\n", info["arch"], info["kernels"])
			return err
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}
