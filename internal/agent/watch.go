package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// watchMountinfo blocks in poll(2) on an open /proc/<pid>/mountinfo and sends the time of
// every mount table change on changes until ctx ends. The kernel flags a change with
// POLLERR|POLLPRI on every open mountinfo file of the namespace (fs/proc_namespace.c
// mounts_poll; proc(5) "/proc/pid/mountinfo"); nothing is read between wake-ups, so an idle
// host costs nothing. Events coalesce: if one is already pending, a newer one is dropped,
// and the pending time (the earliest) is the one reactions are measured from.
//
// A plain file (a fixture root) never signals, so only the periodic resync sees its changes.
func watchMountinfo(ctx context.Context, path string, changes chan<- time.Time) error {
	// A raw descriptor: an *os.File would be registered with the Go runtime's epoll, whose
	// wake-ups consume the change flag that our poll(2) waits for.
	// O_NONBLOCK: a FIFO in place of mountinfo (a crafted --root) must not block the open.
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("opening %q: %w", path, err)
	}
	defer unix.Close(fd)

	// A pipe wakes poll(2) when ctx ends: closing its write end makes the read end hang up.
	var pipe [2]int
	if err := unix.Pipe2(pipe[:], unix.O_CLOEXEC); err != nil {
		return fmt.Errorf("watching %q: %w", path, err)
	}
	wakeFD := pipe[0]
	defer unix.Close(wakeFD)
	var once sync.Once
	closeWake := func() { once.Do(func() { unix.Close(pipe[1]) }) }
	stop := context.AfterFunc(ctx, closeWake)
	defer func() {
		stop()
		closeWake()
	}()

	fds := []unix.PollFd{
		{Fd: int32(fd), Events: unix.POLLPRI},
		{Fd: int32(wakeFD), Events: unix.POLLIN},
	}
	for {
		fds[0].Revents, fds[1].Revents = 0, 0
		_, err := unix.Poll(fds, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("polling %q: %w", path, err)
		}
		if fds[1].Revents != 0 || ctx.Err() != nil {
			return nil
		}
		if fds[0].Revents&(unix.POLLPRI|unix.POLLERR) != 0 {
			select {
			case changes <- time.Now():
			default:
			}
		}
		if fds[0].Revents&(unix.POLLNVAL|unix.POLLHUP) != 0 {
			return fmt.Errorf("polling %q: descriptor no longer valid", path)
		}
	}
}
