package agent

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"

	"transit/messages"
)

// waitDelay bounds how long a finished command's output is waited for: a
// process it left behind may hold its stdout open for ever.
const waitDelay = 2 * time.Second

// process is a task's command, run through sh -c in its own process
// group, its output going to an output and its stdin taking the answers
// to its questions.
type process struct {
	cmd    *exec.Cmd
	cancel context.CancelFunc
	// answers are written to stdin in order, by one goroutine.
	answers chan string
	stdout  *lineWriter
	stderr  *lineWriter
	// done is closed once the command has exited and its output is read;
	// err is then Wait's error.
	done chan struct{}
	err  error
}

// startProcess starts the command for a task.
func startProcess(command, dir string, task messages.TaskLeasedPayload, out *output) (*process, error) {
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "sh", "-c", command)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"TRANSIT_TASK_ID="+task.TaskID,
		"TRANSIT_TASK_PROMPT="+task.Prompt,
		"TRANSIT_TASK_TITLE="+task.Title,
		"TRANSIT_PROJECT_ID="+task.ProjectID,
		"TRANSIT_TASK_MODEL="+task.Model,
	)
	p := &process{cmd: cmd, cancel: cancel, answers: make(chan string, 16), stdout: out.writer(stdout), stderr: out.writer(stderr), done: make(chan struct{})}
	// Not *os.File writers: exec copies the pipes in goroutines that Wait
	// waits for, so every line is in out when done is closed.
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	ownGroup(cmd)
	cmd.WaitDelay = waitDelay
	stdin, err := cmd.StdinPipe()
	if err != nil {
		cancel()
		return nil, fmt.Errorf("stdin of %q: %w", command, err)
	}
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, fmt.Errorf("start %q in %s: %w", command, dir, err)
	}
	go p.answer(stdin)
	go func() {
		p.err = cmd.Wait()
		// A last line without a line break.
		p.stdout.Close()
		p.stderr.Close()
		cancel()
		close(p.done)
	}()
	return p, nil
}

// answer writes each answer and a line break to stdin, until the command
// is gone; a command that stopped reading has the answer lost with it.
func (p *process) answer(stdin io.WriteCloser) {
	for {
		select {
		case a := <-p.answers:
			if _, err := io.WriteString(stdin, a+"\n"); err != nil {
				return
			}
		case <-p.done:
			return
		}
	}
}

// kill ends the command's whole process group and waits for it.
func (p *process) kill() {
	p.cancel()
	<-p.done
}

// status says how the command ended: "exit status N" or the signal, and
// the exit code (-1 for a signal). It is the shell's own: a process it
// left behind holding its output open (Wait's ErrWaitDelay) changes
// nothing.
func (p *process) status() (string, int) {
	if ps := p.cmd.ProcessState; ps != nil {
		return ps.String(), ps.ExitCode()
	}
	return p.err.Error(), -1
}
