package main

import (
	"encoding/json"
	"net/http"
	"strings"
)

// tenant is the idempotency scope: whose keys a request's key is among.
// This demo has no authentication and takes the X-Tenant header; a real
// service returns the authenticated principal. "" is refused (403).
func tenant(r *http.Request) string {
	return strings.TrimSpace(r.Header.Get("X-Tenant"))
}

type order struct {
	ID      int64  `json:"id"`
	Item    string `json:"item"`
	Replica string `json:"replica"` // the replica that ran the handler
}

// createOrder answers POST /orders, behind the idempotency middleware: with
// one Idempotency-Key, it runs once across every replica sharing the
// Redis, and each retry gets the first answer, replayed (header
// Idempotent-Replayed: true), from whichever replica it reaches.
//
// What the middleware cannot cover is a crash between the INSERT's commit
// and the response's being stored: a retry then runs again. A table that
// must never hold a duplicate also keeps the key, under a unique index.
func (s *service) createOrder(w http.ResponseWriter, r *http.Request) {
	var o order
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&o); err != nil || o.Item == "" {
		http.Error(w, `want {"item": "..."}`, http.StatusBadRequest)
		return
	}
	o.Replica = s.cfg.name
	err := s.pool.QueryRow(r.Context(), `INSERT INTO `+schema+`.orders (tenant, item, replica) VALUES ($1, $2, $3) RETURNING id`,
		tenant(r), o.Item, o.Replica).Scan(&o.ID)
	if err != nil {
		http.Error(w, "could not store the order", http.StatusInternalServerError) // not stored: a retry runs again
		return
	}
	s.log.Info("order created", "id", o.ID, "tenant", tenant(r))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(o)
}
