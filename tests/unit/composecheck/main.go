// composecheck loads a compose file with compose-go, the loader `docker compose config` uses
// (schema validation, interpolation, merge keys, reference checks), and prints the normalized
// project as JSON. It lets tests validate compose/docker-compose.yaml where no Docker Compose
// plugin is installed. Usage: composecheck FILE ENV_FILE
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/compose-spec/compose-go/v2/cli"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: composecheck FILE ENV_FILE")
		os.Exit(2)
	}
	opts, err := cli.NewProjectOptions([]string{os.Args[1]}, cli.WithName("authzbench"),
		cli.WithEnvFiles(os.Args[2]), cli.WithOsEnv, cli.WithDotEnv)
	if err == nil {
		var out []byte
		p, lerr := opts.LoadProject(context.Background())
		if err = lerr; err == nil {
			if out, err = p.MarshalJSON(); err == nil {
				_, err = os.Stdout.Write(out)
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
