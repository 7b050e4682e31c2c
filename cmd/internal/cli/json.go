package cli

import (
	"encoding/json"
	"io"

	"github.com/redfence/redfence/fenced"
	"github.com/redfence/redfence/internal/lockview"
)

// The --json output is lockview's schema, which `redfence help json`
// prints; fences are the command's own part of it.

type fencesJSON struct {
	Schema int         `json:"schema"`
	Fences []fenceJSON `json:"fences"`
}

type fenceJSON struct {
	Resource  string        `json:"resource"`
	Token     int64         `json:"token"`
	UpdatedAt lockview.Time `json:"updated_at"`
}

func toFencesJSON(fences []fenced.Fence) fencesJSON {
	out := fencesJSON{Schema: lockview.Schema, Fences: make([]fenceJSON, 0, len(fences))}
	for _, f := range fences {
		out.Fences = append(out.Fences, fenceJSON{Resource: f.Resource, Token: f.Token, UpdatedAt: lockview.Time(f.UpdatedAt)})
	}
	return out
}

// writeJSON writes v indented, with a final newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
