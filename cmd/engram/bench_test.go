package main

import (
	"context"
	"os"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

func TestParseRedisCPU(t *testing.T) {
	info := "# CPU\r\nused_cpu_sys:1.250000\r\nused_cpu_user:2.500000\r\nused_cpu_sys_children:9.0\r\n" +
		"used_cpu_sys_main_thread:1.0\r\nused_cpu_user_main_thread:2.0\r\n"
	got, err := parseRedisCPU(info)
	if err != nil {
		t.Fatal(err)
	}
	if want := 3750 * time.Millisecond; got != want {
		t.Errorf("parseRedisCPU = %v, want %v (user + system, children and per-thread lines left out)", got, want)
	}
	for _, bad := range []string{"# CPU\r\nused_cpu_sys:1.0\r\n", "used_cpu_sys:x\r\nused_cpu_user:1\r\n", ""} {
		if _, err := parseRedisCPU(bad); err == nil {
			t.Errorf("parseRedisCPU(%q) gave no error", bad)
		}
	}
	// A real server answers, and its clock does not run backwards.
	url := os.Getenv("ENGRAM_TEST_REDIS_URL")
	if url == "" {
		return
	}
	opts, err := goredis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := goredis.NewClient(opts)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	a, err := redisCPU(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	b, err := redisCPU(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if a <= 0 || b < a {
		t.Errorf("redisCPU = %v then %v", a, b)
	}
}
