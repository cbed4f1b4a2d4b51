module github.com/tenso-project/tenso/sdk/go/tensogonum

go 1.24.0

require (
	github.com/tenso-project/tenso/sdk/go v0.0.0
	gonum.org/v1/gonum v0.17.0
)

// The SDK module of this checkout (a released tree pins a version instead).
replace github.com/tenso-project/tenso/sdk/go => ../
