package demo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"
)

// checkTimeout bounds the check that a server named by a URL answers.
const checkTimeout = 3 * time.Second

// check runs ping under checkTimeout and says so when that is what ended it.
func check(ctx context.Context, ping func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	err := ping(ctx)
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("no answer within %v: %w", checkTimeout, err)
	}
	return err
}
