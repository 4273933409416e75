package extproc

import (
	"strings"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// limitNames joins the limits' names with commas, for the access-log
// metadata (MetaShadowRejected). Limit names hold no commas.
func limitNames(limits []*accounting.Limit) string {
	if len(limits) == 1 {
		return limits[0].Name
	}
	names := make([]string, len(limits))
	for i, l := range limits {
		names[i] = l.Name
	}
	return strings.Join(names, ",")
}
