// Command verify_receipts checks Glove's signed notes, checkpoints, Merkle proofs and receipt
// bundles with Go's golang.org/x/mod/sumdb/note and sumdb/tlog: an implementation Glove did
// not write. It reads one JSON request on stdin and writes one JSON answer on stdout; the
// Python test (tests/journal/test_go_interop.py) builds it offline and compares.
package main

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

type treeCase struct {
	Leaves      []string   `json:"leaves"`      // base64 entries
	Inclusion   [][2]int64 `json:"inclusion"`   // (index, size) pairs to prove
	Consistency [][2]int64 `json:"consistency"` // (old, new) pairs to prove
}

type request struct {
	VerifierKey string     `json:"vkey"`
	SignerKey   string     `json:"skey"`
	Sign        []string   `json:"sign"`
	Notes       []string   `json:"notes"`
	Bundles     []string   `json:"bundles"`
	Trees       []treeCase `json:"trees"`
}

type treeAnswer struct {
	Roots       []string   `json:"roots"`       // root of every prefix size 1..n
	Inclusion   [][]string `json:"inclusion"`   // proofs, as asked
	Consistency [][]string `json:"consistency"` // proofs, as asked
}

type answer struct {
	VerifierOfSigner string       `json:"verifier_of_signer"`
	Signed           []string     `json:"signed"`
	Notes            []string     `json:"notes"`   // "ok:<text>" or "error:<reason>"
	Bundles          []string     `json:"bundles"` // "ok" or "error:<reason>"
	Trees            []treeAnswer `json:"trees"`
}

// checkpoint parses the C2SP tlog-checkpoint note text: origin, size, base64 root.
func checkpoint(text string) (string, int64, tlog.Hash, error) {
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) < 3 {
		return "", 0, tlog.Hash{}, errors.New("checkpoint has fewer than 3 lines")
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || size < 0 || strconv.FormatInt(size, 10) != lines[1] {
		return "", 0, tlog.Hash{}, errors.New("bad tree size")
	}
	root, err := tlog.ParseHash(lines[2])
	if err != nil {
		return "", 0, tlog.Hash{}, err
	}
	return lines[0], size, root, nil
}

func hashes(list []string) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, 0, len(list))
	for _, item := range list {
		h, err := tlog.ParseHash(item)
		if err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, nil
}

type bundleDoc struct {
	Format         string                 `json:"format"`
	SessionID      string                 `json:"session_id"`
	Receipt        map[string]interface{} `json:"receipt"`
	Checkpoint     string                 `json:"checkpoint"`
	TreeSize       int64                  `json:"tree_size"`
	LeafIndex      int64                  `json:"leaf_index"`
	Leaf           string                 `json:"leaf"`
	InclusionProof []string               `json:"inclusion_proof"`
	Consistency    *struct {
		FromSize int64    `json:"from_size"`
		FromRoot string   `json:"from_root"`
		Proof    []string `json:"proof"`
	} `json:"consistency"`
}

func checkBundle(data string, verifier note.Verifier) error {
	var doc bundleDoc
	if err := json.Unmarshal([]byte(data), &doc); err != nil {
		return err
	}
	if doc.Format != "glove-receipt-bundle/v1" {
		return errors.New("unknown format")
	}
	n, err := note.Open([]byte(doc.Checkpoint), note.VerifierList(verifier))
	if err != nil {
		return err
	}
	origin, size, root, err := checkpoint(n.Text)
	if err != nil {
		return err
	}
	if origin != verifier.Name() || size != doc.TreeSize {
		return errors.New("origin or size differs")
	}
	leaf, err := base64.StdEncoding.DecodeString(doc.Leaf)
	if err != nil {
		return err
	}
	proof, err := hashes(doc.InclusionProof)
	if err != nil {
		return err
	}
	if err := tlog.CheckRecord(proof, size, root, doc.LeafIndex, tlog.RecordHash(leaf)); err != nil {
		return err
	}
	if doc.Consistency != nil {
		old, err := tlog.ParseHash(doc.Consistency.FromRoot)
		if err != nil {
			return err
		}
		cproof, err := hashes(doc.Consistency.Proof)
		if err != nil {
			return err
		}
		if err := tlog.CheckTree(cproof, size, root, doc.Consistency.FromSize, old); err != nil {
			return err
		}
	}
	var entry map[string]interface{}
	if err := json.Unmarshal(leaf, &entry); err != nil {
		return err
	}
	if !reflect.DeepEqual(entry, doc.Receipt) || entry["session_id"] != doc.SessionID {
		return errors.New("the receipt is not the entry")
	}
	return nil
}

func encode(list []tlog.Hash) []string {
	out := make([]string, len(list))
	for i, h := range list {
		out[i] = h.String()
	}
	return out
}

func tree(c treeCase) (treeAnswer, error) {
	var stored []tlog.Hash
	reader := tlog.HashReaderFunc(func(indexes []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(indexes))
		for i, index := range indexes {
			out[i] = stored[index]
		}
		return out, nil
	})
	var ans treeAnswer
	for i, leaf := range c.Leaves {
		data, err := base64.StdEncoding.DecodeString(leaf)
		if err != nil {
			return ans, err
		}
		more, err := tlog.StoredHashes(int64(i), data, reader)
		if err != nil {
			return ans, err
		}
		stored = append(stored, more...)
		root, err := tlog.TreeHash(int64(i+1), reader)
		if err != nil {
			return ans, err
		}
		ans.Roots = append(ans.Roots, root.String())
	}
	for _, pair := range c.Inclusion {
		proof, err := tlog.ProveRecord(pair[1], pair[0], reader)
		if err != nil {
			return ans, err
		}
		ans.Inclusion = append(ans.Inclusion, encode(proof))
	}
	for _, pair := range c.Consistency {
		proof, err := tlog.ProveTree(pair[1], pair[0], reader)
		if err != nil {
			return ans, err
		}
		ans.Consistency = append(ans.Consistency, encode(proof))
	}
	return ans, nil
}

func run() error {
	var req request
	if err := json.NewDecoder(os.Stdin).Decode(&req); err != nil {
		return err
	}
	verifier, err := note.NewVerifier(req.VerifierKey)
	if err != nil {
		return fmt.Errorf("verifier key: %w", err)
	}
	signer, err := note.NewSigner(req.SignerKey)
	if err != nil {
		return fmt.Errorf("signer key: %w", err)
	}
	var ans answer
	ans.VerifierOfSigner = fmt.Sprintf("%s+%08x", signer.Name(), signer.KeyHash())
	for _, text := range req.Sign {
		msg, err := note.Sign(&note.Note{Text: text}, signer)
		if err != nil {
			return err
		}
		ans.Signed = append(ans.Signed, string(msg))
	}
	for _, msg := range req.Notes {
		n, err := note.Open([]byte(msg), note.VerifierList(verifier))
		if err != nil {
			ans.Notes = append(ans.Notes, "error:"+err.Error())
		} else {
			ans.Notes = append(ans.Notes, "ok:"+n.Text)
		}
	}
	for _, data := range req.Bundles {
		if err := checkBundle(data, verifier); err != nil {
			ans.Bundles = append(ans.Bundles, "error:"+err.Error())
		} else {
			ans.Bundles = append(ans.Bundles, "ok")
		}
	}
	for _, c := range req.Trees {
		t, err := tree(c)
		if err != nil {
			return err
		}
		ans.Trees = append(ans.Trees, t)
	}
	return json.NewEncoder(os.Stdout).Encode(ans)
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "verify_receipts:", err)
		os.Exit(1)
	}
}
