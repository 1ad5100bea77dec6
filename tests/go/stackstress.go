// A goroutine-recursion stress with getpid at the leaf, built with cgo (a
// dynamic executable that detach can preload).  Goroutine stacks start at
// 2 KiB: a runtime that puts a signal frame or saved state on the stack of
// the goroutine making the call corrupts its neighbours.
package main

// #include <unistd.h>
import "C"

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
)

//go:noinline
func recurse(n int, pid int) int {
	var pad [24]byte
	pad[n%24] = byte(n)
	if n == 0 {
		if syscall.Getpid() != pid {
			return 1
		}
		return int(pad[0])
	}
	return recurse(n-1, pid) + int(pad[n%24]) - int(byte(n))
}

func main() {
	pid := int(C.getpid())
	var wg sync.WaitGroup
	var bad int64
	for g := 0; g < 400; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 300; i++ {
				if recurse((g+i)%80, pid) != 0 {
					atomic.AddInt64(&bad, 1)
				}
			}
		}(g)
	}
	wg.Wait()
	fmt.Println("done, wrong results:", bad)
	if bad != 0 {
		os.Exit(1)
	}
}
