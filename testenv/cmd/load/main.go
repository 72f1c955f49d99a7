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
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
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
	for i := 0; i < *conns; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			tr := &http.Transport{
				TLSClientConfig:   &tls.Config{RootCAs: pool},
				DisableKeepAlives: *fresh,
				// HTTP/1.1 only: each connection is one of the -c.
				TLSNextProto:        map[string]func(string, *tls.Conn) http.RoundTripper{},
				MaxIdleConnsPerHost: 1,
			}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr}
			var lat []time.Duration
			var n, errs int
			var bytes int64
			firstErr := ""
			for k := i; ctx.Err() == nil; k++ {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, *base+targets[k%len(targets)], nil)
				req.Header.Set("Accept", *accept)
				if *token != "" {
					req.Header.Set("Authorization", "Bearer "+*token)
				}
				t0 := time.Now()
				resp, err := client.Do(req)
				if err == nil {
					var m int64
					m, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					bytes += m
					if err == nil && resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				if ctx.Err() != nil {
					break
				}
				if err != nil {
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
