package guest

import (
	"regexp"
	"strconv"
	"strings"
)

// Console is what the guest's console log says about its network.
type Console struct {
	Started   bool   // /init ran (the kernel booted the initramfs)
	Address   string // e.g. 10.20.0.5/24 from the last "eth0 ... up" line
	Gateway   string // the default gateway it set ("none" when none was offered)
	LeaseFail bool   // udhcpc reported no lease (and no address line followed)
	NoNIC     bool   // there was no eth0
	// MetadataUUID is the uuid the guest read from the metadata service ("none" when the
	// document had none); MetadataFail says it got no answer for a minute.
	MetadataUUID string
	MetadataFail bool
	// SSHHostKey is the SSH server's public host key ("ssh-ed25519 AAAA..."), SSHListening
	// that it started, SSHKeys the names of the public keys installed for the login user
	// (space-separated, from the last report) and Hostname the name set from the metadata.
	SSHHostKey   string
	SSHListening bool
	SSHKeys      string
	Hostname     string
	// ConfigDrive is the device of the config drive (label config-2) and ConfigDriveUUID
	// the uuid in its meta_data.json; NoConfigDrive says there was none.
	ConfigDrive     string
	ConfigDriveUUID string
	NoConfigDrive   bool
	// InitUptime, LeaseUptime and SSHUptime are the guest's uptime (seconds since its
	// kernel started) when /init started, when eth0 got its (last) lease and when the SSH
	// server (last) started listening; 0 when not reported.
	InitUptime, LeaseUptime, SSHUptime float64
}

var (
	upLine          = regexp.MustCompile(`osd-guest: eth0 (\S+) up gateway (\S+)`)
	uptimeField     = regexp.MustCompile(`uptime ([0-9]+(?:\.[0-9]+)?)\s*$`)
	hostKeyLine     = regexp.MustCompile(`^osd-guest: ssh host key (ssh-ed25519 [A-Za-z0-9+/=]+)$`)
	keysLine        = regexp.MustCompile(`^osd-guest: ssh keys (.*?) ?installed for `)
	hostnameLine    = regexp.MustCompile(`^osd-guest: hostname (\S+) \(from `)
	configDriveLine = regexp.MustCompile(`^osd-guest: config drive config-2 on (\S+): uuid (\S+)$`)
)

// ParseConsole reads a console log for the guest's marker lines.
func ParseConsole(log string) Console {
	var c Console
	for _, line := range strings.Split(log, "\n") {
		i := strings.Index(line, Marker)
		if i < 0 {
			continue
		}
		line = strings.TrimSpace(line[i:])
		switch {
		case strings.HasPrefix(line, Marker+" init started"):
			c.Started, c.InitUptime = true, uptimeOf(line)
		case strings.HasPrefix(line, Marker+" no eth0"):
			c.Started, c.NoNIC = true, true
		case strings.HasPrefix(line, Marker+" metadata uuid "):
			c.Started, c.MetadataUUID, c.MetadataFail = true, strings.TrimSpace(strings.TrimPrefix(line, Marker+" metadata uuid ")), false
		case strings.HasPrefix(line, Marker+" metadata unreachable"):
			c.Started, c.MetadataFail = true, true
		case strings.HasPrefix(line, Marker+" ssh server listening"):
			c.Started, c.SSHListening, c.SSHUptime = true, true, uptimeOf(line)
		case strings.HasPrefix(line, Marker+" no config drive"):
			c.Started, c.NoConfigDrive = true, true
		case hostKeyLine.MatchString(line):
			c.Started, c.SSHHostKey = true, hostKeyLine.FindStringSubmatch(line)[1]
		case keysLine.MatchString(line):
			c.Started, c.SSHKeys = true, keysLine.FindStringSubmatch(line)[1]
		case hostnameLine.MatchString(line):
			c.Started, c.Hostname = true, hostnameLine.FindStringSubmatch(line)[1]
		case configDriveLine.MatchString(line):
			m := configDriveLine.FindStringSubmatch(line)
			c.Started, c.ConfigDrive, c.ConfigDriveUUID = true, m[1], m[2]
		case strings.Contains(line, "no DHCP lease"):
			c.Started = true
			if c.Address == "" {
				c.LeaseFail = true
			}
		default:
			if m := upLine.FindStringSubmatch(line); m != nil {
				c.Started, c.Address, c.Gateway, c.LeaseFail, c.LeaseUptime = true, m[1], m[2], false, uptimeOf(line)
			}
		}
	}
	return c
}

// uptimeOf is the "uptime SECONDS" a marker line ends with (0 without one).
func uptimeOf(line string) float64 {
	m := uptimeField.FindStringSubmatch(line)
	if m == nil {
		return 0
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0
	}
	return v
}
