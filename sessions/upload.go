package sessions

import "fmt"

// UploadBudget bounds one multipart request: its parts, its non-file
// fields, and the total of its files (SANDBOX_MAX_UPLOAD_BYTES bounds a
// file and a request alike).
type UploadBudget struct {
	MaxTotal int64
	parts    int
	fields   int
	total    int64
}

const (
	maxUploadParts  = 100
	maxUploadFields = 32
)

// Part accounts for the next part; file says whether it carries a file. An
// error is the reply to send (413).
func (u *UploadBudget) Part(file bool) error {
	u.parts++
	if u.parts > maxUploadParts {
		return fmt.Errorf("too many parts in one upload (at most %d); send the files in several requests", maxUploadParts)
	}
	if !file {
		u.fields++
		if u.fields > maxUploadFields {
			return fmt.Errorf("too many form fields in one upload (at most %d)", maxUploadFields)
		}
	}
	return nil
}

// File accounts for a file's bytes.
func (u *UploadBudget) File(n int) error {
	u.total += int64(n)
	if u.total > u.MaxTotal {
		return fmt.Errorf("the files of one upload total more than %d bytes (SANDBOX_MAX_UPLOAD_BYTES); send them in several requests", u.MaxTotal)
	}
	return nil
}
