// Command load asks one HTTPS server the same requests from many connections at
// once, for a fixed time, and prints what it achieved as JSON: the load
// generator of Levee's throughput benchmarks (bench/workers.ts). It is written
// in Go, not Node, so that on a small machine the client costs far less CPU
// per request than the server it measures.
//
// Each of -c connections is its own HTTP/1.1 client, asking again as soon as it
// has read an answer. With -new-connections every request opens a new TLS
// connection (a full handshake, no session resumption): connections per second.
//
// Usage: load -url https://127.0.0.1:8443 -path /api/v1/pods -token T -ca ca.crt -c 32 -d 10s
package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

type result struct {
	Requests  int     `json:"requests"`
	Errors    int     `json:"errors"`
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"perSecond"`
	Bytes     int64   `json:"bytes"`
	P50Ms     float64 `json:"p50Ms"`
	P99Ms     float64 `json:"p99Ms"`
	// CPU seconds (user and system) the load generator itself spent: what it took from the
	// machine the server shares.
	CPUSeconds float64 `json:"cpuSeconds"`
	// The first error seen, if any, to tell why.
	FirstError string `json:"firstError,omitempty"`
}

func main() {
	base := flag.String("url", "", "server origin")
	paths := flag.String("path", "/", "comma-separated paths, asked in turn")
	token := flag.String("token", "", "bearer token")
	caFile := flag.String("ca", "", "CA bundle the server's certificate is checked against")
	accept := flag.String("accept", "application/json", "Accept header")
	conns := flag.Int("c", 16, "connections asking at once")
	duration := flag.Duration("d", 10*time.Second, "how long to ask")
	fresh := flag.Bool("new-connections", false, "a new TLS connection for every request")
	flag.Parse()

	pool := x509.NewCertPool()
	if *caFile != "" {
		pem, err := os.ReadFile(*caFile)
		if err != nil {
			fail(err)
		}
		pool.AppendCertsFromPEM(pem)
	}
	targets := strings.Split(*paths, ",")
	ctx, cancel := context.WithTimeout(context.Background(), *duration)
	defer cancel()

	var mu sync.Mutex
	var all []time.Duration
	res := result{}
	var wg sync.WaitGroup
	start := time.Now()
	// Each request is written as bytes built once, and its answer read with http.ReadResponse
	// straight off the connection: net/http's Transport (a reading and a writing goroutine per
	// connection, channels between them and the caller) cost about 30 µs of CPU per cached GET,
	// more than half of what the server under test spends, on cores the two share.
	tlsConfig := &tls.Config{RootCAs: pool, NextProtos: []string{"http/1.1"}}
	origin, err := url.Parse(*base)
	if err != nil {
		fail(err)
	}
	requests := make([][]byte, len(targets))
	for k, path := range targets {
		var b strings.Builder
		fmt.Fprintf(&b, "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: levee-load\r\nAccept: %s\r\n", path, origin.Host, *accept)
		if *token != "" {
			fmt.Fprintf(&b, "Authorization: Bearer %s\r\n", *token)
		}
		if *fresh {
			b.WriteString("Connection: close\r\n")
		}
		b.WriteString("\r\n")
		requests[k] = []byte(b.String())
	}
	deadline, _ := ctx.Deadline()
	for i := 0; i < *conns; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			var conn *tls.Conn
			var br *bufio.Reader
			defer func() {
				if conn != nil {
					conn.Close()
				}
			}()
			dialer := &tls.Dialer{Config: tlsConfig}
			var lat []time.Duration
			var n, errs int
			var bytes int64
			firstErr := ""
			for k := i; ctx.Err() == nil; k++ {
				t0 := time.Now()
				err := func() error {
					if conn == nil {
						c, err := dialer.DialContext(ctx, "tcp", origin.Host)
						if err != nil {
							return err
						}
						conn = c.(*tls.Conn)
						// A server that stops answering ends the run at its deadline, not never.
						conn.SetDeadline(deadline.Add(5 * time.Second))
						br = bufio.NewReaderSize(conn, 64<<10)
					}
					if _, err := conn.Write(requests[k%len(requests)]); err != nil {
						return err
					}
					resp, err := http.ReadResponse(br, nil)
					if err != nil {
						return err
					}
					m, err := io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					bytes += m
					if err != nil {
						return err
					}
					if *fresh || resp.Close {
						conn.Close()
						conn = nil
					}
					if resp.StatusCode != http.StatusOK {
						return fmt.Errorf("status %d", resp.StatusCode)
					}
					return nil
				}()
				if ctx.Err() != nil {
					break
				}
				if err != nil {
					if conn != nil {
						conn.Close()
						conn = nil
					}
					errs++
					if firstErr == "" {
						firstErr = err.Error()
					}
					continue
				}
				n++
				lat = append(lat, time.Since(t0))
			}
			mu.Lock()
			res.Requests += n
			res.Errors += errs
			res.Bytes += bytes
			if res.FirstError == "" {
				res.FirstError = firstErr
			}
			all = append(all, lat...)
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	res.Seconds = time.Since(start).Seconds()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		res.CPUSeconds = float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
	}
	res.PerSecond = float64(res.Requests) / res.Seconds
	sort.Slice(all, func(a, b int) bool { return all[a] < all[b] })
	if len(all) > 0 {
		res.P50Ms = float64(all[len(all)/2].Microseconds()) / 1000
		res.P99Ms = float64(all[len(all)*99/100].Microseconds()) / 1000
	}
	out, _ := json.Marshal(res)
	fmt.Println(string(out))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "load:", err)
	os.Exit(1)
}
