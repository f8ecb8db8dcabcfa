// Command trivialgrpc is make bench-service's gRPC baseline: the ID
// service's Connect handler (idservicev1connect) over h2c beside HTTP/1.1,
// whose NextSequence answers every call with one constant 19-digit ID
// (the size of a 63-bit ID) and whose other methods are unimplemented, so
// that what a gRPC unary call costs this machine, server and load client
// (internal/bench/grpcload) together, is measured beside cqlseq serve with
// the same client.
package main

import (
	"context"
	"flag"
	"log"
	"net/http"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/cqlseq/cqlseq/idservice/gen/idservicev1"
	"github.com/cqlseq/cqlseq/idservice/gen/idservicev1/idservicev1connect"
)

// trivial answers NextSequence with a constant.
type trivial struct {
	idservicev1connect.UnimplementedIDServiceHandler
}

func (trivial) NextSequence(context.Context, *connect.Request[v1.NextSequenceRequest]) (*connect.Response[v1.NextSequenceResponse], error) {
	return connect.NewResponse(&v1.NextSequenceResponse{Ids: []int64{1234567890123456789}}), nil
}

func main() {
	listen := flag.String("listen", "127.0.0.1:18083", "address to serve on, host:port (h2c and HTTP/1.1)")
	flag.Parse()
	mux := http.NewServeMux()
	mux.Handle(idservicev1connect.NewIDServiceHandler(trivial{}))
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{
		Addr:              *listen,
		Handler:           mux,
		Protocols:         &p,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	log.Fatal(srv.ListenAndServe())
}
