// Package echo provides the test bed's backends: TCP and UDP servers that
// answer with a configured name (the pod name), so a client can count which
// backend a connection reached.
//
// Protocol (see Reply and ParseReply):
//   - TCP: on accept the server writes "<name>\n" ("<name> <client ip:port>\n"
//     with ReportClient) and closes; in ModeEcho it then echoes what it reads.
//   - UDP: each datagram is answered with "<name>" (or "<name> <client>"); in
//     ModeEcho the payload follows after a newline.
//
// Servers run in pod namespaces as child processes started through
// netns.Topology.Start, so a test can kill a backend like a pod dies. By
// default the child is the running binary itself: every TestMain (or main)
// of a binary that launches echo servers must begin with
//
//	if code, ok := echo.RunChild(); ok {
//		os.Exit(code)
//	}
//
// Alternatively set Launcher.Binary to a built cmd/echo-server. A started
// server is ready when it printed its ready line (sockets bound) and a TCP
// connection from inside its namespace succeeds; Start waits for both with a
// deadline, never a sleep.
package echo
