package tenso

// must is the tests' shorthand for a call whose arguments are known to be valid.
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
