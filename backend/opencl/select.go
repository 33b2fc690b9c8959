package opencl

import (
	"fmt"
	"strings"
	"unicode"
)

// SelectDevices returns the devices a list names: "" or "all" is every
// device, otherwise a comma-separated list of selectors as Options.Device
// takes them (an index, or a case-insensitive substring of "platform:
// name"), each naming the device Options.Device would open, in the list's
// order without repeats. The tests run on the devices GLINT_OPENCL_DEVICES
// selects this way.
func SelectDevices(list string) ([]DeviceInfo, error) {
	ds, err := devices()
	if err != nil {
		return nil, err
	}
	var out []DeviceInfo
	if l := strings.TrimSpace(list); l == "" || strings.EqualFold(l, "all") {
		for _, d := range ds {
			out = append(out, d.info)
		}
		return out, nil
	}
	seen := map[int]bool{}
	for _, sel := range strings.Split(list, ",") {
		if strings.TrimSpace(sel) == "" {
			return nil, fmt.Errorf("opencl: empty selector in device list %q", list)
		}
		d, err := pick(ds, sel)
		if err != nil {
			return nil, err
		}
		if !seen[d.info.Index] {
			seen[d.info.Index] = true
			out = append(out, d.info)
		}
	}
	return out, nil
}

// ShortName names the device in a word, for test names and tables: "pocl"
// for PoCL's CPU device, else the device name up to its first space or
// parenthesis ("llvmpipe", "NVIDIA"), reduced to letters, digits, '-' and
// '_'.
func (d DeviceInfo) ShortName() string {
	if strings.Contains(d.Platform, "Portable Computing Language") {
		return "pocl"
	}
	name := strings.TrimSpace(d.Name)
	if i := strings.IndexAny(name, " ("); i > 0 {
		name = name[:i]
	}
	name = strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, name)
	if name == "" {
		return fmt.Sprintf("device%d", d.Index)
	}
	return name
}
