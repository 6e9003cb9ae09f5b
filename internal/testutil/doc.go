// Package testutil locates the shared test data (real models, tokenizers and
// outside references) for tests.
//
// The data folder is $AOTLM_TESTDATA, or ../shared/testdata relative to the
// repository root. A test that needs a file calls Path; when the file is
// missing the test is skipped with a message on a user's machine, and fails
// under CI (CI=true), where a missing fixture must never pass silently.
package testutil
