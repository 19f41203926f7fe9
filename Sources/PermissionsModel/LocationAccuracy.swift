/// geoclue's accuracy levels, least precise first: the words of the location
/// plugin's max-accuracy= and of a request's "accuracy" option. One list, so that
/// what an app may ask for and what an administrator may cap are the same words.
public enum LocationAccuracy {
    public static let levels = ["none", "country", "city", "neighborhood", "street", "exact"]
}
