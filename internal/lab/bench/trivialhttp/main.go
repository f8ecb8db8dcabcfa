// Command trivialhttp is make bench-service's baseline: a net/http server
// whose one handler answers every request with a fixed 19-byte plain-text
// body (the size of a 63-bit ID in decimal), so that what a request costs
// this machine, server and load client together, is measured beside the
// ID service with the same client.
package main

import (
	"flag"
	"log"
	"net/http"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:18081", "address to serve on, host:port")
	flag.Parse()
	body := []byte("1234567890123456789")
	srv := &http.Server{
		Addr: *listen,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain;charset=UTF-8")
			w.Header().Set("Content-Length", "19")
			_, _ = w.Write(body)
		}),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	log.Fatal(srv.ListenAndServe())
}
