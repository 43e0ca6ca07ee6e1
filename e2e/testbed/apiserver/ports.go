package apiserver

import (
	"fmt"
	"net"
)

// freePorts asks the kernel for n distinct free TCP ports on 127.0.0.1. All
// listeners stay open until every port is known, so the ports differ; they
// are closed before returning, so another process may still take one before
// our child binds it (the caller retries on "address already in use").
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("allocate port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
