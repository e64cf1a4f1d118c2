// Package translations loads kubectl's translations only in a process
// that runs kubectl. kubectl's packages translate their help texts in
// package-level variables, so the first of them to initialize loads the
// translations (parsing the embedded catalog of the system's language):
// 31 ms and 4.4 MB in every process of the binary, a server's too
// (`GODEBUG=inittrace=1 kubeboot version`: k8s.io/kubectl/pkg/cmd/options).
// Elsewhere the texts, never shown, stay untranslated.
//
// kubectl's documented hook (i18n.SetLoadTranslationsFunc) must be set
// before any package translates: Go initializes the packages whose
// imports are done in the order of their import paths, and this one's
// sorts before every k8s.io package, so it is set as soon as i18n is.
package translations

import (
	"os"

	"k8s.io/kubectl/pkg/util/i18n"

	"github.com/kubeboot/kubeboot/internal/app/dispatch"
)

func init() {
	// Only a package that translated before this one could make it
	// fail, and that process loads them as kubectl would.
	_ = i18n.SetLoadTranslationsFunc(func() error {
		if dispatch.Command(os.Args) != "kubectl" {
			return nil
		}
		return i18n.LoadTranslations("kubectl", nil)
	})
}
