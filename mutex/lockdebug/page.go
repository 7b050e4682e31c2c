package lockdebug

import (
	_ "embed"
	"html/template"

	"github.com/redfence/redfence/internal/lockview"
)

//go:embed page.html
var pageHTML string

// pageTemplate renders a page. html/template escapes every value by its
// context (text, attribute, URL): keys, owner ids, labels and the match
// pattern come from users. visible also makes their control and
// bidirectional characters show as escapes, as the redfence command does,
// so that none reorders or hides what the page shows.
var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{"visible": lockview.Visible}).Parse(pageHTML))
