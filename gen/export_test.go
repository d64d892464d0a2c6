package gen

// UnifiedDiff exposes unifiedDiff to the tests.
var UnifiedDiff = unifiedDiff
