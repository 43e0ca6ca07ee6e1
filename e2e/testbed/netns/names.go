package netns

import (
	"crypto/rand"
	"fmt"
	"os"
	"regexp"
	"strconv"
)

var idPattern = regexp.MustCompile(`^[a-z0-9]{1,12}$`)

const idAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

// NewID returns a short topology id: three base-36 digits of the process id
// followed by three random characters, e.g. "2kfq7x". Parallel test binaries
// get different ids with overwhelming probability; a collision is caught by
// `ip netns add`, which refuses an existing name.
func NewID() (string, error) {
	pid := strconv.FormatInt(int64(os.Getpid()%(36*36*36)), 36)
	for len(pid) < 3 {
		pid = "0" + pid
	}
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("random id: %w", err)
	}
	for i := range b {
		b[i] = idAlphabet[int(b[i])%len(idAlphabet)]
	}
	return pid + string(b[:]), nil
}
