// Package configfile is k3s's configuration file for kubeboot's commands:
// a YAML map of the command's long flag names to values (--config), under
// the flags given on the command line.
package configfile

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"
)

// flagName names the configuration file of `kubeboot server` and
// `kubeboot apiserver`: k3s's format, whose keys are the long flag names.
const flagName = "config"

// defaultFile is where the configuration file is read from when
// --config is not given: /etc/kubeboot/config.yaml for root, else
// ~/.config/kubeboot/config.yaml (XDG's place).
func defaultFile() string {
	if os.Geteuid() == 0 {
		return "/etc/kubeboot/config.yaml"
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "kubeboot", "config.yaml")
}

// AddFlag registers --config on cmd.
func AddFlag(cmd *cobra.Command) {
	cmd.Flags().String(flagName, defaultFile(),
		"A YAML file of flag values, keyed by the long flag names (k3s's format: data-dir: /srv/kubeboot, kubelet-arg: [--max-pods=200]). Flags on the command line win over it. The default file is read only if it exists.")
}

// Apply sets the flags of flags that the command line left unset
// from the --config file; it returns a warning for each flag set both
// ways, to different values. An unknown key, a value a flag refuses and a
// file that is not a YAML map are errors naming the file and the key.
func Apply(flags *pflag.FlagSet) (warnings []string, _ error) {
	path, err := flags.GetString(flagName)
	if err != nil || path == "" {
		return nil, err
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && !flags.Changed(flagName) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	values := map[string]any{}
	// Strict: a key given twice is an error, not the last one winning.
	if err := yaml.UnmarshalStrict(data, &values); err != nil {
		return nil, fmt.Errorf("--config %s: not a YAML map of flag names to values: %w", path, err)
	}
	for _, key := range slices.Sorted(maps.Keys(values)) {
		f := flags.Lookup(key)
		if f == nil || key == flagName {
			return nil, fmt.Errorf("--config %s: unknown key %q: the keys are the command's long flag names", path, key)
		}
		args, err := flagValues(values[key])
		if err != nil {
			return nil, fmt.Errorf("--config %s: key %q: %w", path, key, err)
		}
		if f.Changed {
			if given := strings.Join(args, ","); given != f.Value.String() && !sameList(f, args) {
				warnings = append(warnings, fmt.Sprintf("--%s=%s on the command line wins over %s in --config %s", key, f.Value.String(), given, path))
			}
			continue
		}
		if len(args) > 1 {
			if _, isList := f.Value.(pflag.SliceValue); !isList {
				return nil, fmt.Errorf("--config %s: key %q takes one value, not a list", path, key)
			}
		}
		for _, a := range args {
			if err := flags.Set(key, a); err != nil {
				return nil, fmt.Errorf("--config %s: key %q: %w", path, key, err)
			}
		}
	}
	return warnings, nil
}

// flagValues is a YAML value as the flag values it stands for: a scalar
// is one, a list one per item, a map (e.g. feature-gates) one
// key=value,... value.
func flagValues(v any) ([]string, error) {
	switch v := v.(type) {
	case nil:
		return []string{""}, nil
	case []any:
		var out []string
		for _, item := range v {
			switch item.(type) {
			case []any, map[string]any:
				return nil, errors.New("a list may hold only single values")
			}
			out = append(out, scalar(item))
		}
		return out, nil
	case map[string]any:
		pairs := make([]string, 0, len(v))
		for k, val := range v {
			pairs = append(pairs, k+"="+scalar(val))
		}
		slices.Sort(pairs)
		return []string{strings.Join(pairs, ",")}, nil
	default:
		return []string{scalar(v)}, nil
	}
}

// scalar is a YAML scalar as a flag value: numbers in full (YAML's are
// float64 here), not in exponent form.
func scalar(v any) string {
	if f, ok := v.(float64); ok {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

// sameList reports whether a list flag already holds args.
func sameList(f *pflag.Flag, args []string) bool {
	l, ok := f.Value.(pflag.SliceValue)
	return ok && slices.Equal(l.GetSlice(), args)
}
