package lockdebug

import (
	_ "embed"
	"html/template"
)

//go:embed page.html
var pageHTML string

// pageTemplate renders a page. html/template escapes every value by its
// context (text, attribute, URL): keys, owner ids, labels and the match
// pattern come from users.
var pageTemplate = template.Must(template.New("page").Parse(pageHTML))
