package lockdebug

import (
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/redfence/redfence/internal/lockview"
)

// Every field of the page's JSON is in the schema that `redfence help
// json` prints.
func TestSchemaDocNamesPageFields(t *testing.T) {
	for _, v := range []any{page{}, lockerView{}, heldRow{}, campaignRow{}, listingView{}} {
		typ := reflect.TypeOf(v)
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if f.Anonymous || name == "" || name == "-" {
				continue // (the embedded listing is lockview's, checked there)
			}
			assert.Regexp(t, `\b`+regexp.QuoteMeta(name)+`\b`, lockview.SchemaDoc, "%T.%s", v, name)
		}
	}
}
