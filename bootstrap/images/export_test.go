package images

// The build tests' helpers, for the tests of package images_test (those that need
// package bundle, which imports images).
var (
	RequireBuildTools = requireBuildTools
	BuildState        = buildState
	MinimalRecipe     = minimalRecipe
	CatalogState      = catalogState
)
