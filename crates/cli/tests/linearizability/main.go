// Command linearizability checks a history recorded by the chaos test
// (crates/cli/tests/chaos.rs) for linearizability with porcupine.
//
// Usage: linearizability HISTORY.jsonl [VISUALIZATION.html]
//
// Each line of the history is one operation on one key of one space:
//
//	{"client":3,"space":"c1","key":"k2","op":"cput","a":0,"b":0,"cmp":0,
//	 "out":"done","ga":0,"gb":0,"call":1200,"ret":3400}
//
// op is put, create (put_if_not_exist), cput (if a == cmp then set a and b),
// add (b += d), del or get; out is done, cmpfail, notfound, found (a get
// with ga, gb), absent (a get) or unknown (an update whose outcome the
// client could not learn: it may or may not have taken effect, so it has no
// return time). Each key is a register holding nothing or (a, b).
//
// Exit status: 0 when every key's history is linearizable, 1 when one is
// not (the offending keys are printed and the visualization written), 2 on
// bad input, 3 when the checker could not decide in time.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

type record struct {
	Client int    `json:"client"`
	Space  string `json:"space"`
	Key    string `json:"key"`
	Op     string `json:"op"`
	A      int64  `json:"a"`
	B      int64  `json:"b"`
	Cmp    int64  `json:"cmp"`
	D      int64  `json:"d"`
	Out    string `json:"out"`
	GA     int64  `json:"ga"`
	GB     int64  `json:"gb"`
	Call   int64  `json:"call"`
	Ret    int64  `json:"ret"`
}

type input struct {
	Partition string
	Op        string
	A, B, Cmp int64
	D         int64
}

type output struct {
	Out    string
	GA, GB int64
}

// state is one key: absent, or present with attributes a and b.
type state struct {
	Exists bool
	A, B   int64
}

// apply is the sequential specification: the outcome an update has on a
// state, and the state after it.
func apply(s state, in input) (string, state) {
	switch in.Op {
	case "put":
		return "done", state{true, in.A, in.B}
	case "create":
		if s.Exists {
			return "cmpfail", s
		}
		return "done", state{true, in.A, in.B}
	case "cput":
		if !s.Exists {
			return "notfound", s
		}
		if s.A != in.Cmp {
			return "cmpfail", s
		}
		return "done", state{true, in.A, in.B}
	case "add":
		if !s.Exists {
			return "notfound", s
		}
		sum := s.B + in.D
		if (in.D > 0 && sum < s.B) || (in.D < 0 && sum > s.B) {
			return "cmpfail", s // overflow: checked arithmetic changes nothing
		}
		return "done", state{true, s.A, sum}
	case "del":
		if !s.Exists {
			return "notfound", s
		}
		return "done", state{}
	}
	panic("unknown op " + in.Op)
}

func step(st interface{}, i interface{}, o interface{}) (bool, interface{}) {
	s, in, out := st.(state), i.(input), o.(output)
	if in.Op == "get" {
		if !s.Exists {
			return out.Out == "absent", s
		}
		return out.Out == "found" && out.GA == s.A && out.GB == s.B, s
	}
	want, next := apply(s, in)
	if out.Out == "unknown" {
		// It may have taken effect at any moment after its call, or never:
		// linearized last, its effect is observed by no one.
		return true, next
	}
	return out.Out == want, next
}

var model = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			p := op.Input.(input).Partition
			if _, ok := byKey[p]; !ok {
				keys = append(keys, p)
			}
			byKey[p] = append(byKey[p], op)
		}
		sort.Strings(keys)
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() interface{} { return state{} },
	Step: step,
	DescribeOperation: func(i interface{}, o interface{}) string {
		in, out := i.(input), o.(output)
		switch in.Op {
		case "get":
			if out.Out == "found" {
				return fmt.Sprintf("get() -> (%d, %d)", out.GA, out.GB)
			}
			return "get() -> " + out.Out
		case "add":
			return fmt.Sprintf("add(%d) -> %s", in.D, out.Out)
		case "cput":
			return fmt.Sprintf("cput(a == %d: %d, %d) -> %s", in.Cmp, in.A, in.B, out.Out)
		case "del":
			return "del() -> " + out.Out
		default:
			return fmt.Sprintf("%s(%d, %d) -> %s", in.Op, in.A, in.B, out.Out)
		}
	},
	DescribeState: func(st interface{}) string {
		s := st.(state)
		if !s.Exists {
			return "absent"
		}
		return fmt.Sprintf("(%d, %d)", s.A, s.B)
	},
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: linearizability HISTORY.jsonl [VISUALIZATION.html]")
		os.Exit(2)
	}
	file, err := os.Open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer file.Close()
	var history []porcupine.Operation
	counts := map[string]int{}
	scanner := bufio.NewScanner(file)
	scanner.Buffer(make([]byte, 1<<20), 1<<20)
	for line := 1; scanner.Scan(); line++ {
		var r record
		if err := json.Unmarshal(scanner.Bytes(), &r); err != nil {
			fmt.Fprintf(os.Stderr, "line %d: %v\n", line, err)
			os.Exit(2)
		}
		switch r.Op {
		case "put", "create", "cput", "add", "del", "get":
		default:
			fmt.Fprintf(os.Stderr, "line %d: unknown op %q\n", line, r.Op)
			os.Exit(2)
		}
		ret := r.Ret
		if r.Out == "unknown" {
			if r.Op == "get" {
				fmt.Fprintf(os.Stderr, "line %d: a get without an answer belongs nowhere\n", line)
				os.Exit(2)
			}
			ret = math.MaxInt64
		}
		if ret < r.Call {
			fmt.Fprintf(os.Stderr, "line %d: returns before its call\n", line)
			os.Exit(2)
		}
		counts[r.Out]++
		history = append(history, porcupine.Operation{
			ClientId: r.Client,
			Input:    input{Partition: r.Space + "/" + r.Key, Op: r.Op, A: r.A, B: r.B, Cmp: r.Cmp, D: r.D},
			Call:     r.Call,
			Output:   output{Out: r.Out, GA: r.GA, GB: r.GB},
			Return:   ret,
		})
	}
	if err := scanner.Err(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Printf("history: %d operations %v\n", len(history), counts)
	result, info := porcupine.CheckOperationsVerbose(model, history, 5*time.Minute)
	switch result {
	case porcupine.Ok:
		fmt.Println("linearizable: yes")
	case porcupine.Illegal:
		fmt.Println("linearizable: NO")
		single := model
		single.Partition = nil
		for _, part := range model.Partition(history) {
			if !porcupine.CheckOperations(single, part) {
				fmt.Printf("not linearizable: key %s (%d operations)\n", part[0].Input.(input).Partition, len(part))
			}
		}
		if len(os.Args) > 2 {
			if err := porcupine.VisualizePath(model, info, os.Args[2]); err == nil {
				fmt.Println("visualization:", os.Args[2])
			}
		}
		os.Exit(1)
	default:
		fmt.Println("linearizable: unknown (the checker ran out of time)")
		os.Exit(3)
	}
}
