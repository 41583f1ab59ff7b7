package bench

import (
	"fmt"
	"strconv"
	"strings"
)

// byteSize is a flag.Value for byte counts with optional binary/decimal units.
type byteSize int

func (b *byteSize) String() string { return strconv.Itoa(int(*b)) }

func (b *byteSize) Set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	*b = byteSize(n)
	return nil
}

// sizeList is a flag.Value for a comma-separated list of byte sizes.
type sizeList []int

func (l *sizeList) String() string {
	parts := make([]string, len(*l))
	for i, n := range *l {
		parts[i] = formatSize(n)
	}
	return strings.Join(parts, ",")
}

func (l *sizeList) Set(s string) error {
	var out sizeList
	for _, part := range strings.Split(s, ",") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		n, err := parseSize(part)
		if err != nil {
			return err
		}
		out = append(out, n)
	}
	*l = out
	return nil
}

// parseSize reads "1024", "16KiB", "1MiB", "4k", "1MB" etc. Binary units are
// the norm for I/O sizes; KB/MB are accepted as powers of 10 for completeness.
func parseSize(s string) (int, error) {
	s = strings.TrimSpace(s)
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	n, err := strconv.Atoi(s[:i])
	if err != nil {
		return 0, fmt.Errorf("bad size %q: %w", s, err)
	}
	mult := map[string]int{
		"": 1, "b": 1,
		"k": 1 << 10, "kib": 1 << 10, "ki": 1 << 10,
		"m": 1 << 20, "mib": 1 << 20, "mi": 1 << 20,
		"g": 1 << 30, "gib": 1 << 30, "gi": 1 << 30,
		"kb": 1e3, "mb": 1e6, "gb": 1e9,
	}[strings.ToLower(strings.TrimSpace(s[i:]))]
	if mult == 0 {
		return 0, fmt.Errorf("bad size unit in %q (use B, KiB, MiB, GiB, KB, MB or GB)", s)
	}
	if n <= 0 {
		return 0, fmt.Errorf("size %q must be positive", s)
	}
	return n * mult, nil
}

// formatSize prints n with the largest binary unit that divides it exactly.
func formatSize(n int) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// humanSize is formatSize for display only: sizes that are no whole number
// of KiB or MiB (an average batch, say) are rounded to one decimal.
func humanSize(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) != 0:
		return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
	case n >= 1<<10 && n%(1<<10) != 0:
		return fmt.Sprintf("%.1fKiB", float64(n)/(1<<10))
	}
	return formatSize(n)
}
