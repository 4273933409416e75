// Package docs holds tokenwarden's documentation, in Markdown. It has no
// code: its tests keep the documentation true to the repository — every
// relative link and anchor resolves, every repository path it names exists,
// nothing refers to files outside the repository, the README's package
// table matches the module's packages, the configuration reference names
// every key the config file accepts, and its complete example passes
// tokenwarden check-config.
package docs
