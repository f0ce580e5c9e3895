//go:build noprom

package main

import "net/http"

func metricsHandler() http.Handler { return http.NotFoundHandler() }
