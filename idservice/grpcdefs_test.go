package idservice

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/reflect/protoreflect"

	v1 "github.com/cqlseq/cqlseq/idservice/gen/idservicev1"
)

// TestGRPCCodesCoverEveryCode: every Code constant of errors.go has its
// gRPC code in grpcCodes (a new code cannot fall through to INTERNAL
// unnoticed).
func TestGRPCCodesCoverEveryCode(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "errors.go", nil, 0)
	require.NoError(t, err)
	var codes []Code
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, sp := range g.Specs {
			vs := sp.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Code" {
				continue
			}
			lit := vs.Values[0].(*ast.BasicLit)
			s, err := strconv.Unquote(lit.Value)
			require.NoError(t, err)
			codes = append(codes, Code(s))
		}
	}
	require.Len(t, codes, len(grpcCodes), "errors.go's codes against grpcCodes")
	for _, c := range codes {
		_, ok := grpcCodes[c]
		assert.True(t, ok, "code %s has no gRPC code", c)
	}
}

// TestProtoMatchesGenerated: the .proto's methods, messages and fields
// (names, numbers, optional/repeated) are those of the generated
// descriptor: an edit of the .proto without make proto fails here. A
// line-based reading of the file (one field a line, no nested messages),
// not a protobuf parser.
func TestProtoMatchesGenerated(t *testing.T) {
	b, err := os.ReadFile("proto/cqlseq/idservice/v1/idservice.proto")
	require.NoError(t, err)
	var code []string // the file without comments
	for line := range strings.SplitSeq(string(b), "\n") {
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		code = append(code, line)
	}
	text := strings.Join(code, "\n")
	fd := v1.File_cqlseq_idservice_v1_idservice_proto
	assert.Equal(t, "cqlseq/idservice/v1/idservice.proto", fd.Path())
	assert.Contains(t, text, "package "+string(fd.Package())+";")

	var fromProto, fromGen []string
	for _, m := range regexp.MustCompile(`rpc (\w+)\((\w+)\) returns \((\w+)\);`).FindAllStringSubmatch(text, -1) {
		fromProto = append(fromProto, m[1]+"("+m[2]+") "+m[3])
	}
	require.Equal(t, 1, fd.Services().Len())
	ms := fd.Services().Get(0).Methods()
	for i := range ms.Len() {
		m := ms.Get(i)
		fromGen = append(fromGen, string(m.Name())+"("+string(m.Input().Name())+") "+string(m.Output().Name()))
	}
	assert.Equal(t, fromGen, fromProto, "methods")

	fromProto, fromGen = nil, nil
	field := regexp.MustCompile(`^\s*(optional |repeated )?([\w.]+) (\w+) = (\d+);`)
	for _, m := range regexp.MustCompile(`(?ms)^message (\w+) \{(.*?)\}`).FindAllStringSubmatch(text, -1) {
		fromProto = append(fromProto, "message "+m[1])
		for line := range strings.SplitSeq(m[2], "\n") {
			if f := field.FindStringSubmatch(line); f != nil {
				fromProto = append(fromProto, m[1]+"."+f[3]+" = "+f[4]+" "+strings.TrimSpace(f[1]))
			}
		}
	}
	for i := range fd.Messages().Len() {
		md := fd.Messages().Get(i)
		fromGen = append(fromGen, "message "+string(md.Name()))
		for j := range md.Fields().Len() {
			f := md.Fields().Get(j)
			card := ""
			switch {
			case f.Cardinality() == protoreflect.Repeated:
				card = "repeated"
			case f.HasOptionalKeyword():
				card = "optional"
			}
			fromGen = append(fromGen, string(md.Name())+"."+string(f.Name())+" = "+strconv.Itoa(int(f.Number()))+" "+card)
		}
	}
	sort.Strings(fromProto)
	sort.Strings(fromGen)
	assert.Equal(t, fromGen, fromProto, "messages and fields")
}
