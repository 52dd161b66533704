package integration

// Strict arguments: a misspelt argument is an error that names what the
// tool takes and the closest match, never a silent no-op.

import (
	"fmt"
	"strings"
	"testing"
)

func TestStrictArguments(t *testing.T) {
	parallel(t)
	d := startData(t, []string{"--backend", "native"})
	av := d.wantErrorless("execute_code_async", map[string]any{"command": "read line; echo got:$line"})
	id := av["execution_id"]
	// The misspelling of issue 16: "input" for "input_data".
	v, isErr := d.call("send_stdin", map[string]any{"execution_id": id, "input": "x\n"})
	want := `unknown argument "input"; send_stdin takes execution_id, input_data, close_stdin — did you mean input_data?`
	if !isErr || !strings.Contains(fmt.Sprint(v["error"]), want) {
		t.Fatalf("send_stdin with \"input\": want an error %q, got isError=%v %v", want, isErr, v)
	}
	// Nothing to send and no close.
	if v, isErr := d.call("send_stdin", map[string]any{"execution_id": id}); !isErr || !strings.Contains(fmt.Sprint(v["error"]), "nothing to send") {
		t.Fatalf("send_stdin with nothing: %v", v)
	}
	// The program still waits for its line, and gets it.
	d.wantErrorless("send_stdin", map[string]any{"execution_id": id, "input_data": "x\n"})
	out := d.wantErrorless("get_execution_output", map[string]any{"execution_id": id, "wait": true})
	if out["status"] != "completed" || !strings.Contains(fmt.Sprint(out["output"]), "got:x") {
		t.Fatalf("after the right argument: %v", out)
	}
	// Every tool checks: a data tool, a workspace tool, seed 003's.
	if v, isErr := d.call("run_python", map[string]any{"cod": "print(1)"}); !isErr || v["error"] != "invalid_arguments" || !strings.Contains(fmt.Sprint(v["message"]), "did you mean code?") {
		t.Fatalf("run_python with \"cod\": %v", v)
	}
	if v, isErr := d.call("execute_code", map[string]any{"code": "1", "language": "python", "sessionId": "x"}); !isErr || !strings.Contains(fmt.Sprint(v["error"]), "did you mean session_id?") {
		t.Fatalf("execute_code with \"sessionId\": %v", v)
	}
	if v, isErr := d.call("sandbox.run_code", map[string]any{"conversation_id": "c", "language": "python", "code": "1"}); !isErr || !strings.Contains(fmt.Sprint(v["output"]), "did you mean conversationId?") {
		t.Fatalf("sandbox.run_code with \"conversation_id\": %v", v)
	}
	if v, isErr := d.call("list_executions", map[string]any{"all": true}); !isErr || !strings.Contains(fmt.Sprint(v["error"]), `unknown argument "all"; list_executions takes session_id`) {
		t.Fatalf("list_executions with \"all\": %v", v)
	}
}
