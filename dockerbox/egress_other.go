//go:build !linux

package dockerbox

import (
	"errors"
	"net"
)

func (b *Backend) proxyListeners(string) (net.Listener, net.Listener, error) {
	return nil, nil, errors.New("network allow-lists in Docker mode need Linux; use no network.allowed_domains")
}
