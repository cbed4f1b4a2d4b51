module tenso.invalid/tools/godoc

go 1.24
