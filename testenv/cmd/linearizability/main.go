// Command linearizability records a history of concurrent writes and consistent reads through a
// server (Levee, in front of the real apiserver) and checks it with porcupine, the checker etcd's
// robustness tests use. The model is a small key-value store: a few ConfigMaps, each holding one
// value. Writers PATCH the value; readers, without a resourceVersion, GET one key, LIST all of them,
// or start a watch-list and read its initial state up to the initial-events-end bookmark. Every
// read must be explainable by some order of the operations that respects real time: a read that
// began after a write completed sees it, or something newer.
//
// A write whose outcome is unknown (the connection failed, a 5xx) may or may not have happened:
// it stays in the history with no return, so the checker may place it anywhere after its call,
// or nowhere. A read that failed constrains nothing and is left out. Meanwhile Lease renewals move
// etcd's revision, as in any cluster, so the ConfigMaps are quiet between writes.
//
// It prints one JSON object with the counts and the result, and exits 1 unless the history is
// linearizable; with -visualize it writes porcupine's HTML view of the history there.
//
//	linearizability -server URL -token T -ca FILE -namespace NS [-duration 30s] [-writers 3] ...
//
// -write-direct sends the writes to the apiserver itself (-direct): with a cache that lags behind
// it and answers consistent reads as they stand, the checker must find the history illegal.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// Keys is the number of ConfigMaps in the model.
const Keys = 4

const absent = "<absent>"

type state [Keys]string

type kind int

const (
	write kind = iota
	get
	list
	watchList
)

func (k kind) String() string {
	return [...]string{"write", "get", "list", "watch-list"}[k]
}

type input struct {
	Kind  kind
	Key   int
	Value string
}

type output struct {
	Value  string
	Values state
}

var model = porcupine.Model{
	Init: func() interface{} {
		var s state
		for i := range s {
			s[i] = "init"
		}
		return s
	},
	Step: func(st, in, out interface{}) (bool, interface{}) {
		s := st.(state)
		i := in.(input)
		switch i.Kind {
		case write:
			s[i.Key] = i.Value
			return true, s
		case get:
			return out.(output).Value == s[i.Key], s
		default:
			return out.(output).Values == s, s
		}
	},
	DescribeOperation: func(in, out interface{}) string {
		i := in.(input)
		switch i.Kind {
		case write:
			return fmt.Sprintf("write(k%d, %s)", i.Key, i.Value)
		case get:
			return fmt.Sprintf("get(k%d) -> %s", i.Key, out.(output).Value)
		default:
			return fmt.Sprintf("%s -> %v", i.Kind, out.(output).Values)
		}
	},
	DescribeState: func(st interface{}) string {
		return fmt.Sprint(st.(state))
	},
}

type recorder struct {
	start time.Time
	mu    sync.Mutex
	ops   []porcupine.Operation
	count map[string]int
}

func (r *recorder) now() int64 { return time.Since(r.start).Nanoseconds() }

func (r *recorder) add(client int, in input, call int64, out output, ret int64, what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
	r.count[what]++
}

func (r *recorder) note(what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count[what]++
}

type client struct {
	http   *http.Client
	server string
	token  string
	ns     string
}

func (c *client) do(ctx context.Context, method, path, contentType string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.server+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	return c.http.Do(req)
}

func (c *client) path(key int) string {
	return fmt.Sprintf("/api/v1/namespaces/%s/configmaps/k%d", c.ns, key)
}

type configMap struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Data map[string]string `json:"data"`
}

func keyOf(name string) int {
	var k int
	if _, err := fmt.Sscanf(name, "k%d", &k); err != nil || k < 0 || k >= Keys {
		return -1
	}
	return k
}

func main() {
	server := flag.String("server", "", "server URL (Levee)")
	direct := flag.String("direct", "", "the apiserver's URL, for setting up and for the lease churn (default: -server)")
	token := flag.String("token", "", "bearer token")
	caFile := flag.String("ca", "", "CA file")
	ns := flag.String("namespace", "", "namespace of the ConfigMaps")
	duration := flag.Duration("duration", 30*time.Second, "how long to run")
	writers := flag.Int("writers", 3, "concurrent writers")
	getters := flag.Int("getters", 2, "concurrent GET readers")
	listers := flag.Int("listers", 1, "concurrent LIST readers")
	watchListers := flag.Int("watch-listers", 1, "concurrent watch-list readers")
	churn := flag.Int("churn", 50, "Lease renewals per second elsewhere")
	visualize := flag.String("visualize", "", "write porcupine's HTML view of the history here")
	checkFor := flag.Duration("check-timeout", 2*time.Minute, "how long porcupine may search")
	writeDirect := flag.Bool("write-direct", false, "write to the apiserver directly, not through -server")
	flag.Parse()
	if *direct == "" {
		*direct = *server
	}

	pem, err := os.ReadFile(*caFile)
	if err != nil {
		fail(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	transport := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, MaxIdleConnsPerHost: 64}
	hc := &http.Client{Transport: transport, Timeout: 20 * time.Second}
	via := &client{http: hc, server: *server, token: *token, ns: *ns}
	setup := &client{http: hc, server: *direct, token: *token, ns: *ns}
	writer := via
	if *writeDirect {
		writer = setup
	}

	ctx := context.Background()
	for k := 0; k < Keys; k++ {
		body := fmt.Sprintf(`{"metadata":{"name":"k%d"},"data":{"v":"init"}}`, k)
		res, err := setup.do(ctx, "POST", fmt.Sprintf("/api/v1/namespaces/%s/configmaps", *ns), "application/json", []byte(body))
		if err != nil {
			fail(err)
		}
		res.Body.Close()
		if res.StatusCode != 201 {
			fail(fmt.Errorf("creating k%d: HTTP %d", k, res.StatusCode))
		}
	}
	for l := 0; l < 10; l++ {
		res, err := setup.do(ctx, "POST", fmt.Sprintf("/apis/coordination.k8s.io/v1/namespaces/%s/leases", *ns), "application/json", []byte(fmt.Sprintf(`{"metadata":{"name":"l%d"},"spec":{"holderIdentity":"x"}}`, l)))
		if err == nil {
			res.Body.Close()
		}
	}

	rec := &recorder{start: time.Now(), count: map[string]int{}}
	deadline := time.Now().Add(*duration)
	var wg sync.WaitGroup
	id := 0
	spawn := func(n int, f func(client int)) {
		for i := 0; i < n; i++ {
			c := id
			id++
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(deadline) {
					f(c)
				}
			}()
		}
	}
	// Writers pause now and then, so the ConfigMaps go quiet while the leases do not.
	spawn(*writers, func(c int) {
		key := rand.IntN(Keys)
		value := fmt.Sprintf("c%d-%d", c, rec.now())
		call := rec.now()
		res, err := writer.do(ctx, "PATCH", writer.path(key), "application/merge-patch+json", []byte(fmt.Sprintf(`{"data":{"v":%q}}`, value)))
		in := input{Kind: write, Key: key, Value: value}
		switch {
		case err != nil || res.StatusCode >= 500 && !refused(res):
			// It may or may not have happened: no return.
			rec.add(c, in, call, output{}, math.MaxInt64, "write-unknown")
			time.Sleep(200 * time.Millisecond)
		case res.StatusCode == 200:
			rec.add(c, in, call, output{}, rec.now(), "write")
		default:
			// Refused (a 4xx, or no connection to the apiserver at all): it did not happen.
			rec.note(fmt.Sprintf("write-refused-%d", res.StatusCode))
			time.Sleep(200 * time.Millisecond)
		}
		if res != nil {
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
		pause := time.Duration(rand.IntN(300)) * time.Millisecond
		if rand.IntN(10) == 0 {
			pause = time.Duration(1000+rand.IntN(1500)) * time.Millisecond
		}
		time.Sleep(pause)
	})
	read := func(c int, k kind, fn func() (output, int, bool)) {
		call := rec.now()
		out, key, ok := fn()
		ret := rec.now()
		if !ok {
			rec.note(k.String() + "-failed")
			time.Sleep(200 * time.Millisecond)
			return
		}
		rec.add(c, input{Kind: k, Key: key}, call, out, ret, k.String())
		time.Sleep(time.Duration(rand.IntN(100)) * time.Millisecond)
	}
	spawn(*getters, func(c int) {
		read(c, get, func() (output, int, bool) {
			key := rand.IntN(Keys)
			res, err := via.do(ctx, "GET", via.path(key), "", nil)
			if err != nil {
				return output{}, key, false
			}
			defer res.Body.Close()
			if res.StatusCode == 404 {
				return output{Value: absent}, key, true
			}
			var cm configMap
			if res.StatusCode != 200 || json.NewDecoder(res.Body).Decode(&cm) != nil {
				return output{}, key, false
			}
			if res.Header.Get("Levee-Consistent-Read") == "verified" {
				rec.note("get-from-cache")
			}
			return output{Value: cm.Data["v"]}, key, true
		})
	})
	spawn(*listers, func(c int) {
		read(c, list, func() (output, int, bool) {
			res, err := via.do(ctx, "GET", fmt.Sprintf("/api/v1/namespaces/%s/configmaps", *ns), "", nil)
			if err != nil {
				return output{}, 0, false
			}
			defer res.Body.Close()
			var l struct{ Items []configMap }
			if res.StatusCode != 200 || json.NewDecoder(res.Body).Decode(&l) != nil {
				return output{}, 0, false
			}
			if res.Header.Get("Levee-Consistent-Read") == "verified" {
				rec.note("list-from-cache")
			}
			return output{Values: valuesOf(l.Items)}, 0, true
		})
	})
	spawn(*watchListers, func(c int) {
		read(c, watchList, func() (output, int, bool) {
			wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			defer cancel()
			res, err := via.do(wctx, "GET", fmt.Sprintf("/api/v1/namespaces/%s/configmaps?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=10", *ns), "", nil)
			if err != nil {
				return output{}, 0, false
			}
			defer res.Body.Close()
			if res.StatusCode != 200 {
				return output{}, 0, false
			}
			// The state at the initial-events-end bookmark: the initial ADDED events and any change
			// after them, as client-go's reflector folds them; the apiserver, too, sends the changes
			// that come between its initial events and that bookmark.
			byName := map[string]configMap{}
			scanner := bufio.NewScanner(res.Body)
			scanner.Buffer(make([]byte, 1<<20), 16<<20)
			for scanner.Scan() {
				var e struct {
					Type   string
					Object json.RawMessage
				}
				if json.Unmarshal(scanner.Bytes(), &e) != nil {
					return output{}, 0, false
				}
				switch e.Type {
				case "ADDED", "MODIFIED", "DELETED":
					var cm configMap
					if json.Unmarshal(e.Object, &cm) != nil {
						return output{}, 0, false
					}
					if e.Type == "DELETED" {
						delete(byName, cm.Metadata.Name)
					} else {
						byName[cm.Metadata.Name] = cm
					}
				case "BOOKMARK":
					if strings.Contains(string(e.Object), `"k8s.io/initial-events-end":"true"`) {
						items := make([]configMap, 0, len(byName))
						for _, cm := range byName {
							items = append(items, cm)
						}
						return output{Values: valuesOf(items)}, 0, true
					}
				default:
					// An ERROR: no initial state to judge.
					return output{}, 0, false
				}
			}
			return output{}, 0, false
		})
	})
	// Lease renewals elsewhere, through the apiserver directly.
	if *churn > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(deadline); i++ {
				res, err := setup.do(ctx, "PATCH", fmt.Sprintf("/apis/coordination.k8s.io/v1/namespaces/%s/leases/l%d", *ns, i%10), "application/merge-patch+json", []byte(fmt.Sprintf(`{"spec":{"holderIdentity":"h%d"}}`, i)))
				if err == nil {
					io.Copy(io.Discard, res.Body)
					res.Body.Close()
				}
				time.Sleep(time.Second / time.Duration(*churn))
			}
		}()
	}
	wg.Wait()

	ops := withoutUnobservedUnknownWrites(rec.ops)
	rec.count["write-unknown-unobserved"] = len(rec.ops) - len(ops)
	result, info := porcupine.CheckOperationsVerbose(model, ops, *checkFor)
	if *visualize != "" {
		if f, err := os.Create(*visualize); err == nil {
			porcupine.Visualize(model, info, f)
			f.Close()
		}
	}
	summary := map[string]interface{}{"operations": len(ops), "counts": rec.count, "result": string(result)}
	out, _ := json.Marshal(summary)
	fmt.Println(string(out))
	if result != porcupine.Ok {
		os.Exit(1)
	}
}

// refused says Levee could not connect to the apiserver at all (its Status names the socket
// error): nothing reached the apiserver, so the write did not happen.
func refused(res *http.Response) bool {
	if res.StatusCode != http.StatusServiceUnavailable {
		return false
	}
	body, _ := io.ReadAll(res.Body)
	return bytes.Contains(body, []byte("ECONNREFUSED"))
}

// withoutUnobservedUnknownWrites drops the writes of unknown outcome whose value no read saw. Such a
// write, with no return, may be placed after every other operation, where nothing observes it:
// the history is linearizable with it exactly when it is without it. Keeping it only makes the
// search longer, exponentially in their number.
func withoutUnobservedUnknownWrites(ops []porcupine.Operation) []porcupine.Operation {
	seen := map[string]bool{}
	for _, op := range ops {
		in := op.Input.(input)
		switch in.Kind {
		case get:
			seen[op.Output.(output).Value] = true
		case list, watchList:
			for _, v := range op.Output.(output).Values {
				seen[v] = true
			}
		}
	}
	kept := ops[:0:0]
	for _, op := range ops {
		in := op.Input.(input)
		if in.Kind == write && op.Return == math.MaxInt64 && !seen[in.Value] {
			continue
		}
		kept = append(kept, op)
	}
	return kept
}

func valuesOf(items []configMap) state {
	var s state
	for i := range s {
		s[i] = absent
	}
	for _, cm := range items {
		if k := keyOf(cm.Metadata.Name); k >= 0 {
			s[k] = cm.Data["v"]
		}
	}
	return s
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "linearizability:", err)
	os.Exit(2)
}
