/* Empty: CLinkOrder's module map carries only its link directives. */
