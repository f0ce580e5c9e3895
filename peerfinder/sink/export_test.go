package sink

// Validate and ReadSchema are validate and readSchema, for the schema tests
// of the sinks that import this package (in package sink_test, so no import
// cycle).
var (
	Validate   = validate
	ReadSchema = readSchema
)
